// The API's reference: Swagger UI (/docs) or ReDoc (/redoc), both reference.html, served from the app itself
// (no CDN), reading the schema with the token the timeline page keeps in this tab, and (Swagger
// UI) sending it with every "Try it out".
"use strict";

const TOKEN = "mcp-state-versions-token";
const tokenForm = document.getElementById("token");

function authorized(request) {
  const token = sessionStorage.getItem(TOKEN);
  if (token) request.headers.Authorization = `Bearer ${token}`;
  return request;
}

async function start(retried) {
  const response = await fetch("openapi.json", authorized({ headers: { Accept: "application/json" } }));
  if (response.status === 401) {
    tokenForm.hidden = false;
    document.getElementById("token-refused").hidden = !retried;
    document.getElementById("token-input").focus();
    return;
  }
  tokenForm.hidden = true;
  const spec = await response.json();
  const element = document.getElementById("reference");
  // (the viewers' globals: their bundles load before this script)
  if (element.dataset.viewer === "redoc") Redoc.init(spec, {}, element);
  else SwaggerUIBundle({ spec, domNode: element, requestInterceptor: authorized });
}

tokenForm.addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN, document.getElementById("token-input").value);
  start(true);
});
start(false);
