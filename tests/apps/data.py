"""Small stand-ins for the data the tutorials download: the Chinook SQLite database's tables
the SQL agent reads, a few rows each."""

from __future__ import annotations

import sqlite3
from pathlib import Path

CHINOOK = """
CREATE TABLE "Artist" ("ArtistId" INTEGER NOT NULL, "Name" NVARCHAR(120), PRIMARY KEY ("ArtistId"));
CREATE TABLE "Album" ("AlbumId" INTEGER NOT NULL, "Title" NVARCHAR(160) NOT NULL,
    "ArtistId" INTEGER NOT NULL, PRIMARY KEY ("AlbumId"));
CREATE TABLE "Genre" ("GenreId" INTEGER NOT NULL, "Name" NVARCHAR(120), PRIMARY KEY ("GenreId"));
CREATE TABLE "Track" ("TrackId" INTEGER NOT NULL, "Name" NVARCHAR(200) NOT NULL,
    "AlbumId" INTEGER, "GenreId" INTEGER, "Milliseconds" INTEGER NOT NULL,
    PRIMARY KEY ("TrackId"));
INSERT INTO Artist VALUES (1, 'AC/DC'), (2, 'Accept');
INSERT INTO Album VALUES
    (1, 'For Those About To Rock We Salute You', 1), (2, 'Balls to the Wall', 2);
INSERT INTO Genre VALUES (1, 'Rock'), (2, 'Jazz'), (20, 'Sci Fi & Fantasy');
INSERT INTO Track VALUES
    (1, 'For Those About To Rock (We Salute You)', 1, 1, 343719),
    (2, 'Balls to the Wall', 2, 1, 342562),
    (3, 'Desafinado', NULL, 2, 185338),
    (4, 'Battlestar Galactica', NULL, 20, 2911783);
"""


def make_chinook(folder: Path) -> None:
    """``Chinook.db`` in ``folder``: four of Chinook's tables, a few rows each."""
    con = sqlite3.connect(folder / "Chinook.db")
    try:
        con.executescript(CHINOOK)
        con.commit()
    finally:
        con.close()
