"""The run pages: the runs list, a run, a comparison and a sweep, read in a browser.

``routes.router`` serves the HTML shells, the page-data JSON the page scripts
read, sign-in and the static files (the page scripts and the vendored uPlot).
The HTML carries nothing a user logged; the scripts fetch it as JSON and insert
it as text. ``defaults`` holds the pages' tunable numbers.
"""
