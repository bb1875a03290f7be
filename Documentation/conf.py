# Sphinx configuration of iser-rs's documentation:
#   sphinx-build -W -b html Documentation .out/doc
project = "iser-rs"
copyright = "iser-rs developers"
master_doc = "index"
exclude_patterns = []
html_theme = "alabaster"
