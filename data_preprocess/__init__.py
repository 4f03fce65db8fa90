"""Dataset builders (run as scripts: ``python data_preprocess/<name>.py --help``)."""
