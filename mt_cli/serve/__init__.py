"""`mt serve`: a translation server for one model or a folder of them. Three APIs (the JSON API in
web_app.py, LibreTranslate's in libretranslate.py, DeepL's in deepl.py) parse their bodies into one
request (api_request.py) for one pipeline (request_pipeline.py): limits checked once (limits.py),
the model chosen by languages or a pivot (models.py, catalog.py), the cache (translation_cache.py),
and each model's decoding threads merging requests into batches (batcher.py, service.py,
documents.py), with Prometheus metrics (telemetry.py) and a web page (page.html)."""
