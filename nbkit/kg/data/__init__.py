"""Data files of nbkit.kg (a package so setuptools ships the .tsv files with the wheel)."""
