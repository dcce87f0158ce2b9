"""frame.convert.importer: the writing side of ``frame model import``: each component's
graphs (built by frame, weights named by diffusers keys) written with the checkpoint's weights
streamed in and converted as ``frame model convert`` converts (``graph_weights``), the small files
of the folder (``layout``), all of it aside and resumable until renamed into place (``writer``)."""
