"""colmz's asv benchmarks (``asv run --python=same --quick --show-stderr``); see asv.conf.json."""
