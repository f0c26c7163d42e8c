"""Suite-wide set-up."""

# pandas registers its Arrow extension types ("pandas.period", ...) with pyarrow the first time a
# parquet file is written. pytester's in-process runs (tests/testing/test_pytest_plugin.py) restore
# sys.modules afterwards: if that first write happened inside one, the module is forgotten while the
# registration stays, and the next parquet write re-imports it and fails with "A type extension
# with name pandas.period already defined". Importing it once here keeps every test order working.
import pandas.core.arrays.arrow.extension_types  # noqa: F401
