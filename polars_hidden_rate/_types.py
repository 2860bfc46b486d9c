"""Array types shared by the stages."""

import numpy as np
import numpy.typing as npt

Float64Array = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.int64]
CountArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
