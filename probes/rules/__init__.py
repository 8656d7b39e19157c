"""Reading text, pure and without I/O: parsers of tool output, log rules, the Xid catalog,
and the finding type they share with ``rigwatch explain``."""
