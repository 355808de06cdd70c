"""pytest configuration of tests/python."""


def pytest_configure(config):
    # `make test-python-asan` runs every test file here against the extension
    # built with ASan/UBSan, except the tests marked no_asan (they build and run
    # other programs, or move millions of objects: minutes under the sanitizers).
    config.addinivalue_line("markers", "no_asan: not run by make test-python-asan")
