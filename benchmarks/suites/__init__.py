"""The benchmark suites, one module each, each with ``main(argv)``: run as ``python -m benchmarks NAME [options]``."""
