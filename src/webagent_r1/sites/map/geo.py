"""Pure geometry and formatting of the map: distances, bearings, coordinates, hours.

Everything here is a pure function, shared by the pages, the router and the task samplers,
so a number a task expects is computed by the same code that shows it on the page.
"""

from __future__ import annotations

import math
import re
import unicodedata

EARTH_RADIUS_M = 6_371_000.0
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
"""Weekdays in the order of ``place_hours.day`` (0 = Monday)."""

# Possessive runs and one separator (a comma, a semicolon or spaces): linear time on any
# input; two adjacent `\s*` around an optional part were quadratic on a run of spaces.
_COORD_RE = re.compile(r"(-?\d{1,2}(?:\.\d++)?+)(?:\s*+[,;]\s*+|\s++)(-?\d{1,3}(?:\.\d++)?+)")


def haversine_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in meters between two WGS84 points."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(math.sqrt(a))


def bearing_deg(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Initial compass bearing from point 1 to point 2, in degrees [0, 360)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dl = math.radians(lon2 - lon1)
    x = math.sin(dl) * math.cos(p2)
    y = math.cos(p1) * math.sin(p2) - math.sin(p1) * math.cos(p2) * math.cos(dl)
    return (math.degrees(math.atan2(x, y)) + 360.0) % 360.0


def compass(bearing: float) -> str:
    """``0`` -> ``north``, ``100`` -> ``east`` (eight-point compass)."""
    names = ("north", "northeast", "east", "southeast", "south", "southwest", "west", "northwest")
    return names[int(((bearing % 360) + 22.5) // 45) % 8]


def turn(prev_bearing: float, new_bearing: float) -> str:
    """How a walker turns between two bearings: ``straight``, ``left``, ``sharp right``, …"""
    delta = (new_bearing - prev_bearing + 540.0) % 360.0 - 180.0  # (-180, 180]
    side = "right" if delta > 0 else "left"
    mag = abs(delta)
    if mag < 25:
        return "straight"
    if mag < 60:
        return f"slight {side}"
    if mag < 135:
        return side
    return f"sharp {side}"


def fmt_coord(value: float) -> str:
    """A coordinate as the map shows and stores it: 5 decimals (~1 m)."""
    return f"{value:.5f}"


def fmt_latlon(lat: float, lon: float) -> str:
    """``40.44123, -79.99512``."""
    return f"{fmt_coord(lat)}, {fmt_coord(lon)}"


def parse_latlon(text: str) -> tuple[float, float] | None:
    """``"40.44123, -79.99512"`` -> ``(40.44123, -79.99512)``; None if not coordinates."""
    m = _COORD_RE.fullmatch((text or "").strip())
    if not m:
        return None
    lat, lon = float(m.group(1)), float(m.group(2))
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        return None
    return lat, lon


def fmt_distance(meters: float) -> str:
    """A distance as the map shows it: ``850 m`` below 1 km (10 m steps), else ``2.3 km``."""
    if meters < 995:
        return f"{int(round(meters / 10.0)) * 10} m"
    return f"{meters / 1000.0:.1f} km"


def fmt_duration(seconds: float) -> str:
    """A travel time as the map shows it: ``7 min`` or ``1 h 05 min`` (at least 1 min)."""
    minutes = max(1, int(round(seconds / 60.0)))
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def fmt_radius(meters: int) -> str:
    """A search radius label: ``500 m``, ``1 km``, ``2 km``."""
    return f"{meters // 1000} km" if meters >= 1000 and meters % 1000 == 0 else f"{meters} m"


def fold(text: str) -> str:
    """Lower-case, accents removed, punctuation as spaces: the form names are compared in."""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(c for c in t if not unicodedata.combining(c)).lower().replace("'", "")
    return re.sub(r"[^a-z0-9]+", " ", t).strip()


def fmt_hours(opens: str | None, closes: str | None) -> str:
    """One day's opening hours as shown: ``08:00 - 18:00`` or ``Closed``."""
    return f"{opens} - {closes}" if opens and closes else "Closed"


def minutes_of(hhmm: str) -> int:
    """``"08:30"`` -> ``510``."""
    h, m = hhmm.split(":")
    return int(h) * 60 + int(m)


def is_open_at(opens: str | None, closes: str | None, hhmm: str) -> bool:
    """Whether a place with these hours is open at ``hhmm`` (closing time excluded)."""
    if not opens or not closes:
        return False
    return minutes_of(opens) <= minutes_of(hhmm) < minutes_of(closes)
