"""`mt serve`: a translation server. One decoding thread merges concurrent requests into batches
(batcher.py) and decodes them with the same Translator `mt translate` uses (service.py), behind a
FastAPI app (app.py) with Prometheus metrics (telemetry.py), a web page (page.html) and
LibreTranslate's API (libretranslate.py: documents.py, languages.py, detect.py)."""
