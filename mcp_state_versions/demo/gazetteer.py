"""An example MCP server: a tiny gazetteer whose tools return structured content.

``get_aoi`` finds a place's area; ``compare_areas`` compares two, which a model passes as
``@state:`` handles rather than copying the numbers (:mod:`mcp_state_versions.agent.handles`).

Run it over stdio (what the agent's MCP client does), from anywhere the library is installed::

    python -m mcp_state_versions.demo.gazetteer

Its structured result (``bbox``, ``name``, ``country``) is what
:func:`mcp_state_versions.agent.mcp_servers.load_publishing_tools` publishes into ``tool_state`` as
``gazet/get_aoi/bbox`` and so on, when the server is registered under the name ``gazet``.
"""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

server = FastMCP("gazet", log_level="WARNING")  # quiet: no line on stderr per request

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


class Comparison(BaseModel):
    wider: str
    taller: str
    #: How far ``b``'s centre lies east of ``a``'s, in degrees (west is negative).
    east_offset: float


@server.tool()
def compare_areas(a: list[float], b: list[float]) -> Comparison:
    """Compare two bounding boxes (west, south, east, north): which is wider, which taller."""
    width_a, width_b = a[2] - a[0], b[2] - b[0]
    height_a, height_b = a[3] - a[1], b[3] - b[1]
    return Comparison(
        wider="a" if width_a > width_b else "b" if width_b > width_a else "same",
        taller="a" if height_a > height_b else "b" if height_b > height_a else "same",
        east_offset=round((b[0] + b[2]) / 2 - (a[0] + a[2]) / 2, 6),
    )


@server.tool(structured_output=False)
def describe(place: str) -> str:
    """A long plain-text description of a place's area (text, not structured content)."""
    found = PLACES.get(place.strip().lower())
    if found is None:
        raise ValueError(f"no area of interest known for {place!r}")
    name, country, (west, south, east, north) = found
    lines = [f"{name} ({country}): west {west}, south {south}, east {east}, north {north}."]
    lines += [f"Survey note {n}: the area of {name} was measured again." for n in range(1, 40)]
    return "\n".join(lines)


if __name__ == "__main__":
    server.run("stdio")
