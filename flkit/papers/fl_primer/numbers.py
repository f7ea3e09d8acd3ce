"""Numbers the primer compares with: none.

The primer teaches FedAvg (McMahan et al., AISTATS 2017) and FedProx (Li et al., MLSys 2020) on a
small scale; it states no paper's table and records only its own measurements. The claims it
judges are qualitative (see ``claims.py``). The file exists so every paper folder has the same
shape; a number the notebook ever shows beside a paper's goes here, with where it comes from.
"""

from __future__ import annotations

TITLE = "A primer on federated learning: FedAvg, non-IID data, FedProx and client drift"
CITATION = (
    "McMahan et al., Communication-Efficient Learning of Deep Networks from Decentralized "
    "Data, AISTATS 2017; Li et al., Federated Optimization in Heterogeneous Networks, "
    "MLSys 2020"
)

NUMBERS: dict = {}
