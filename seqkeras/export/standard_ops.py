"""A SavedModel's slice updates in standard TensorFlow ops, for TF Serving.

Layers write their loop buffers with one op in every graph,
`keras.ops.slice_update` (`seqkeras.layers.state.write_step`): XLA
writes it in place and the TFLite converter makes it the
DYNAMIC_UPDATE_SLICE builtin. On TensorFlow that op is
`XlaDynamicUpdateSlice`, which exists only for XLA: the TF Serving binary
has no kernel for it outside a compiled cluster. Which runtime a graph is
for is the exporter's business, not the layers': no layer reads a mode
while it is traced. So `saved_model(..., target="serving")` saves the
graph as traced, then rewrites each `XlaDynamicUpdateSlice` outside the
XLA clusters (`audit.xla_compiled_functions`) into standard ops with CPU
kernels (`finish_saved_model`):

    start   = max(min(indices, shape(operand) - shape(update)), 0)
    where   = Where(Fill(shape(update), True))     # (n, rank) int64
    output  = TensorScatterUpdate(operand, where + start, reshape(update, [-1]))

the same result as the slice update for any rank (its start clamped as
XLA clamps it), written in O(size of the update): the row a loop step
writes, not the whole buffer. tf2onnx maps these ops to ONNX (`NonZero`,
`ScatterND`). The same pass drops the references to the custom gradients
a SavedModel is written without (`finish_saved_model`).

The rewrite edits `saved_model.pb` (TensorFlow's generated protocol
buffers: no public API edits a saved graph; tests/test_private_apis.py
fails loudly if they move; nodes are made with `tf.compat.v1`'s
`NodeDef` and `AttrValue`) and removes `fingerprint.pb`, whose checksums
describe the graph before the rewrite (loaders treat a missing
fingerprint as absent, not as an error).
"""

import os

import numpy as np


def _attr(**value):
    import tensorflow as tf

    return tf.compat.v1.AttrValue(**value)


def _lowered(node, in_function):
    """The nodes replacing the `XlaDynamicUpdateSlice` `node` (edited in
    place into the final `TensorScatterUpdate`, so every reference to its
    output stays valid); `in_function`: a FunctionDef's node (outputs
    named `node:arg:0`) or a GraphDef's (`node:0`)."""
    import tensorflow as tf

    operand, update, starts = node.input[:3]
    controls = list(node.input[3:])
    dtype, index_type = node.attr["T"].type, node.attr["Tindices"].type
    prefix = node.name + "/standard_ops/"
    added = []

    def add(name, op, inputs, output_arg, **attrs):
        new = tf.compat.v1.NodeDef(name=prefix + name, op=op, input=inputs, device=node.device)
        for key, value in attrs.items():
            new.attr[key].CopyFrom(value)
        added.append(new)
        return f"{new.name}:{output_arg}:0" if in_function else f"{new.name}:0"

    def const(name, value, kind):
        tensor = tf.make_tensor_proto(np.asarray(value, tf.dtypes.as_dtype(kind).as_numpy_dtype))
        return add(name, "Const", [], "output", value=_attr(tensor=tensor), dtype=_attr(type=kind))

    t, ti, i64 = _attr(type=dtype), _attr(type=index_type), _attr(type=tf.int64.as_datatype_enum)
    operand_shape = add("operand_shape", "Shape", [operand], "output", T=t, out_type=ti)
    update_shape = add("update_shape", "Shape", [update], "output", T=t, out_type=ti)
    room = add("room", "Sub", [operand_shape, update_shape], "z", T=ti)
    start = add("clamp_high", "Minimum", [starts, room], "z", T=ti)
    start = add("clamp_low", "Maximum", [start, const("zero", 0, index_type)], "z", T=ti)
    start = add(
        "start",
        "Cast",
        [start],
        "y",
        SrcT=ti,
        DstT=i64,
        Truncate=_attr(b=False),
    )
    true = const("true", True, tf.bool.as_datatype_enum)
    every = add(
        "every",
        "Fill",
        [update_shape, true],
        "output",
        T=_attr(type=tf.bool.as_datatype_enum),
        index_type=ti,
    )
    where = add("where", "Where", [every], "index", T=_attr(type=tf.bool.as_datatype_enum))
    indices = add("indices", "AddV2", [where, start], "z", T=i64)
    flat = const("flat", [-1], tf.int32.as_datatype_enum)
    values = add(
        "values",
        "Reshape",
        [update, flat],
        "output",
        T=t,
        Tshape=_attr(type=tf.int32.as_datatype_enum),
    )
    node.op = "TensorScatterUpdate"
    del node.input[:]
    node.input.extend([operand, indices, values] + controls)
    for key in list(node.attr):
        if not key.startswith("_"):
            del node.attr[key]
    node.attr["T"].CopyFrom(t)
    node.attr["Tindices"].CopyFrom(i64)
    return added


def _rewrite(nodes, in_function):
    """Rewrites the slice updates among `nodes` (a repeated NodeDef
    field); returns how many."""
    found = [node for node in nodes if node.op == "XlaDynamicUpdateSlice"]
    for node in found:
        nodes.extend(_lowered(node, in_function))
    return len(found)


def finish_saved_model(path, lower_slice_updates=True):
    """Edits the SavedModel at `path`, written without its custom
    gradients (`SaveOptions(experimental_custom_gradients=False)`: a
    server never differentiates, and saving them traced each one):

    - the references to those gradients are dropped (the
      `_gradient_op_type` of `tf.custom_gradient`'s IdentityN nodes), so
      loading logs no warning and a gradient, if one is asked for, is
      TensorFlow's own through the saved ops (exact: the custom gradients
      of seqkeras' loops compute the same; an op without a gradient
      raises, as `XlaDynamicUpdateSlice` does in a TFLite-bound graph);
    - with `lower_slice_updates`, the `XlaDynamicUpdateSlice` ops outside
      XLA clusters are rewritten into standard ops (module docstring).

    Args:
        path: a SavedModel directory.
        lower_slice_updates: rewrite the slice updates (TF Serving's
            graphs) or keep them (graphs for the TFLite converter).

    Returns:
        How many slice updates were rewritten.
    """
    # TensorFlow's generated protocol buffers: no public API reads and
    # writes a SavedModel's graphs without loading it
    from tensorflow.core.protobuf import saved_model_pb2

    from seqkeras.export import audit

    path = audit.saved_model_dir("finish_saved_model", path)
    file = os.path.join(path, "saved_model.pb")
    saved = saved_model_pb2.SavedModel()
    with open(file, "rb") as f:
        saved.ParseFromString(f.read())
    clusters = audit.compiled_function_names([m.graph_def for m in saved.meta_graphs])
    count, dropped = 0, 0
    for meta_graph in saved.meta_graphs:
        graph = meta_graph.graph_def
        for nodes in [graph.node] + [f.node_def for f in graph.library.function]:
            for node in nodes:
                if "_gradient_op_type" in node.attr:
                    del node.attr["_gradient_op_type"]
                    dropped += 1
        if not lower_slice_updates:
            continue
        count += _rewrite(graph.node, in_function=False)
        for function in graph.library.function:
            if function.signature.name not in clusters:
                count += _rewrite(function.node_def, in_function=True)
    if count or dropped:
        with open(file, "wb") as f:
            f.write(saved.SerializeToString())
        fingerprint = os.path.join(path, "fingerprint.pb")
        if os.path.exists(fingerprint):
            os.remove(fingerprint)
    return count
