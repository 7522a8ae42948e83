"""The conformance suite `builder test IMAGE` runs against a container of an image."""
