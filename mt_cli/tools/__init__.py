"""Commands built from the layers below: evaluation, heat maps, curves, reports, the quickstart."""
