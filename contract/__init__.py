"""What the parts agree on, in one place: the run folder's and the node folder's layouts, and
the errors a user can act on. Standard library only, and Python 3.6-compatible (vermin checks
it): provisioning ships it beside bench/ (contract/codedigest.py SHIPPED), and bench/
takes the node folder's file names from it; everything that names one of these imports it."""
