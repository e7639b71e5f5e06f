"""The model layer shared by phone and node: templates, tool-call parsing, grammars, runtime."""
