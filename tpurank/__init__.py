"""tpurank's shared core: what every stage may import (stage configs and run metadata, atomic
writes, the five collections). Nothing here imports a stage.

Layers, one way: ``tpurank`` -> ``features`` -> ``models`` -> ``ensemble``.
"""

__version__ = "0.1.0"
