0n
F
toolsb=


search_webSearch the web.

fetch"{"type":"string"}(
web
Webtools
run2find(