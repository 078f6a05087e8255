"""``dgl.data``: the names of DGL's dataset classes, so that scripts importing them load; graphstore
downloads no datasets, so building one raises ``NotImplementedError`` saying what to do instead: load
the graph with DGL (or build it from your arrays with ``dgl.graph`` / ``dgl.heterograph``) and hand it
to ``dgl.distributed.partition_graph``.

:mod:`.utils` has ``save_graphs`` / ``load_graphs`` for graphs built here.
"""

from __future__ import annotations

from graphstore.compat.dgl.data import utils
from graphstore.compat.dgl.data.utils import load_graphs, save_graphs

# DGL 2.4's dataset classes (dgl.data), by name.
DATASET_NAMES = (
    "AIFBDataset",
    "AMDataset",
    "ActorDataset",
    "AmazonCoBuyComputerDataset",
    "AmazonCoBuyPhotoDataset",
    "AmazonRatingsDataset",
    "BA2MotifDataset",
    "BACommunityDataset",
    "BAShapeDataset",
    "BGSDataset",
    "BitcoinOTCDataset",
    "CLUSTERDataset",
    "COCOSuperpixelsDataset",
    "CSVDataset",
    "ChameleonDataset",
    "CitationGraphDataset",
    "CiteseerGraphDataset",
    "CoauthorCSDataset",
    "CoauthorPhysicsDataset",
    "CoraFullDataset",
    "CoraGraphDataset",
    "CornellDataset",
    "DGLBuiltinDataset",
    "DGLDataset",
    "FB15k237Dataset",
    "FB15kDataset",
    "FakeNewsDataset",
    "FlickrDataset",
    "FraudAmazonDataset",
    "FraudDataset",
    "FraudYelpDataset",
    "GDELTDataset",
    "GINDataset",
    "KarateClubDataset",
    "LegacyPPIDataset",
    "LegacyTUDataset",
    "MUTAGDataset",
    "MinesweeperDataset",
    "MovieLensDataset",
    "PATTERNDataset",
    "PPIDataset",
    "PeptidesFunctionalDataset",
    "PeptidesStructuralDataset",
    "PubmedGraphDataset",
    "QuestionsDataset",
    "RedditDataset",
    "RomanEmpireDataset",
    "SBMMixtureDataset",
    "SSTDataset",
    "SquirrelDataset",
    "TUDataset",
    "TexasDataset",
    "TolokersDataset",
    "TreeCycleDataset",
    "TreeGridDataset",
    "VOCSuperpixelsDataset",
    "WN18Dataset",
    "WikiCSDataset",
    "WisconsinDataset",
    "YelpDataset",
    "ZINCDataset",
)


class UnavailableDataset:
    """A DGL dataset class by name; graphstore does not download or build DGL's datasets.

    Raises:
        NotImplementedError: when built (the message says how to get the graph instead).
    """

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            f"dgl.data.{type(self).__name__} is one of DGL's datasets, which graphstore does not download: "
            "load the graph with DGL (or build it from your arrays with dgl.graph / dgl.heterograph) and "
            "pass it to dgl.distributed.partition_graph"
        )


def _dataset_class(name: str) -> type:
    return type(name, (UnavailableDataset,), {"__doc__": f"DGL's ``dgl.data.{name}`` (not available here)."})


globals().update({name: _dataset_class(name) for name in DATASET_NAMES})

__all__ = ["DATASET_NAMES", "UnavailableDataset", "load_graphs", "save_graphs", "utils", *DATASET_NAMES]
