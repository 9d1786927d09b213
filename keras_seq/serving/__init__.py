"""A REST server speaking TensorFlow Serving's API for keras-seq SavedModels.

* :mod:`~keras_seq.serving.layout`: ``MODEL_BASE/NAME/VERSION`` and :func:`publish_saved_model`;
* :mod:`~keras_seq.serving.registry`: loads the highest version, polls for new ones;
* :mod:`~keras_seq.serving.codec`: TF Serving's row (``instances``) and columnar (``inputs``)
  JSON, limits;
* :mod:`~keras_seq.serving.dynamic_batching`: dynamic batching on worker threads;
* :mod:`~keras_seq.serving.app`: the FastAPI app and :func:`run_server` (uvicorn).

Only :mod:`layout` is imported here, so ``keras-seq serve --help`` stays fast.
"""

from keras_seq.serving.layout import discover_models, list_versions, publish_saved_model

__all__ = ["discover_models", "list_versions", "publish_saved_model"]
