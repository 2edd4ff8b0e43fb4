"""Documents in, the same structure out: sentence splitting and paragraphs (more document types
build on these). Uses `Translator` only."""
