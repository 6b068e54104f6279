"""blocktrace's command line and Panel server."""
