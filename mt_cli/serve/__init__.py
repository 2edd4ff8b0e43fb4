"""`mt serve`: a translation server. One decoding thread merges concurrent requests into batches
(batcher.py) and decodes them with the same Translator `mt translate` uses (service.py), behind a
FastAPI app (app.py) with Prometheus metrics (telemetry.py) and a web page (page.html)."""
