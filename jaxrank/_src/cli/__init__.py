"""The command line (``jaxrank ...``): parser, commands and the store of compiled programs."""
