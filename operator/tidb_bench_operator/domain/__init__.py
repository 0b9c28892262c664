"""Pure domain code: models, sysbench argv/parsing, analysis, manifest builders."""
