import tempfile
from pathlib import Path

from _common import delivered, raises

column_mean = delivered("csvmean").column_mean
with tempfile.TemporaryDirectory() as folder:
    data = Path(folder) / "data.csv"
    data.write_text("name,age,score\nann,30,1.5\nbob,40,2.5\ncid,50,5\n")
    assert abs(column_mean(str(data), "age") - 40.0) < 1e-9
    assert abs(column_mean(str(data), "score") - 3.0) < 1e-9
    assert isinstance(column_mean(str(data), "age"), float)
    assert raises(KeyError, column_mean, str(data), "height")
    empty = Path(folder) / "empty.csv"
    empty.write_text("name,age\n")
    assert raises(ValueError, column_mean, str(empty), "age")
print("csv-mean: ok")
