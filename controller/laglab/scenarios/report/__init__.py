"""report.md, report.html and the plots of a run, made from its files alone."""
