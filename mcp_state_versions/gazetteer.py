"""An example MCP server: a tiny gazetteer whose get_aoi returns structured content.

Run it over stdio (what the agent's MCP client does), from anywhere the library is installed::

    python -m mcp_state_versions.gazetteer

Its structured result (``bbox``, ``name``, ``country``) is what
:func:`mcp_state_versions.mcp_servers.load_publishing_tools` publishes into ``tool_state`` as
``gazet/get_aoi/bbox`` and so on, when the server is registered under the name ``gazet``.
"""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

server = FastMCP("gazet")

PLACES = {
    "copenhagen": ("Copenhagen", "DK", [12.4, 55.5, 12.7, 55.8]),
    "aarhus": ("Aarhus", "DK", [9.9, 56.1, 10.3, 56.2]),
    "oslo": ("Oslo", "NO", [10.6, 59.8, 10.9, 60.0]),
}


class AreaOfInterest(BaseModel):
    name: str
    country: str
    bbox: list[float]


@server.tool()
def get_aoi(place: str) -> AreaOfInterest:
    """Find the area of interest (bounding box: west, south, east, north) for a place name."""
    found = PLACES.get(place.strip().lower())
    if found is None:
        raise ValueError(f"no area of interest known for {place!r}; try Copenhagen, Aarhus or Oslo")
    name, country, bbox = found
    return AreaOfInterest(name=name, country=country, bbox=bbox)


if __name__ == "__main__":
    server.run("stdio")
