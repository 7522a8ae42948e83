"""What every stage shares: the error family and its printer, paths, the value grammars and
quoting, the image contract's names, safe reading of users' files and writing of outputs."""
