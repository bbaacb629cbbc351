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
    rows    = operand[start[0] : start[0] + shape(update)[0]]
    rows    = where(pad(ones(update), ...), pad(update, ...), rows)  # update in place
    output  = TensorScatterUpdate(operand, range(start[0], ...)[:, None], rows)

the same result as the slice update for any rank (its start clamped as
XLA clamps it), written in O(size of the rows it touches): a loop step's
row, not the whole buffer, with one scatter index per row (an index per
element made a served LSTM 1.4x slower). tf2onnx maps these ops to ONNX
(`Slice`, `Pad`, `Where`, `ScatterND`). The same pass drops the references to the custom gradients
a SavedModel is written without (`finish_saved_model`).

The rewrite edits `saved_model.pb` (read as TensorFlow's generated
protocol buffer by `audit.read_saved_model`: no public API edits a saved
graph; nodes are made with `tf.compat.v1`'s `NodeDef` and `AttrValue`)
and removes `fingerprint.pb`, whose checksums describe the graph before
the rewrite (loaders treat a missing fingerprint as absent, not as an
error).
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

    t, ti = _attr(type=dtype), _attr(type=index_type)
    i64, i32 = _attr(type=tf.int64.as_datatype_enum), _attr(type=tf.int32.as_datatype_enum)
    boolean = _attr(type=tf.bool.as_datatype_enum)

    def vector(name, value):  # an int64 constant
        return const(name, value, tf.int64.as_datatype_enum)

    def part(name, x, begin, end, end_mask=0, shrink=0):  # x[begin:end] of a vector
        masks = dict(begin_mask=0, ellipsis_mask=0, new_axis_mask=0)
        return add(
            name,
            "StridedSlice",
            [
                x,
                vector(name + "/begin", [begin]),
                vector(name + "/end", [end]),
                vector(name + "/step", [1]),
            ],
            "output",
            T=i64,
            Index=i64,
            end_mask=_attr(i=end_mask),
            shrink_axis_mask=_attr(i=shrink),
            **{k: _attr(i=v) for k, v in masks.items()},
        )

    def concat(name, parts):
        axis = const(name + "/axis", 0, tf.int32.as_datatype_enum)
        return add(
            name, "ConcatV2", parts + [axis], "output", T=i64, N=_attr(i=len(parts)), Tidx=i32
        )

    # the start clamped as XLA clamps it (int64 from here on)
    starts = add("starts", "Cast", [starts], "y", SrcT=ti, DstT=i64, Truncate=_attr(b=False))
    operand_shape = add("operand_shape", "Shape", [operand], "output", T=t, out_type=i64)
    update_shape = add("update_shape", "Shape", [update], "output", T=t, out_type=i64)
    room = add("room", "Sub", [operand_shape, update_shape], "z", T=i64)
    start = add("clamp_high", "Minimum", [starts, room], "z", T=i64)
    start = add("clamp_low", "Maximum", [start, vector("zero", 0)], "z", T=i64)
    # the rows the update touches: operand[start[0] : start[0] + update rows]
    first = part("first", start, 0, 1)
    rest = part("rest", start, 1, 0, end_mask=1)
    origin = add("origin", "ZerosLike", [rest], "y", T=i64)
    width = part("trailing", operand_shape, 1, 0, end_mask=1)  # the whole rows
    height = part("height", update_shape, 0, 1)
    rows = add(
        "rows",
        "Slice",
        [operand, concat("rows_begin", [first, origin]), concat("rows_size", [height, width])],
        "output",
        T=t,
        Index=i64,
    )
    # those rows with the update in place: padded to them, chosen by a mask
    before = concat("before", [vector("no_rows", [0]), rest])
    rows_shape = add("rows_shape", "Shape", [rows], "output", T=t, out_type=i64)
    after = add(
        "after",
        "Sub",
        [add("spare", "Sub", [rows_shape, update_shape], "z", T=i64), before],
        "z",
        T=i64,
    )
    paddings = add(
        "paddings", "Pack", [before, after], "output", T=i64, N=_attr(i=2), axis=_attr(i=1)
    )
    padded = add("padded", "Pad", [update, paddings], "output", T=t, Tpaddings=i64)
    every = add(
        "every",
        "Fill",
        [update_shape, const("true", True, tf.bool.as_datatype_enum)],
        "output",
        T=boolean,
        index_type=i64,
    )
    mask = add("mask", "Pad", [every, paddings], "output", T=boolean, Tpaddings=i64)
    values = add("values", "SelectV2", [mask, padded, rows], "output", T=t)
    # written back as whole rows: one index per row, as a loop's step writes
    low = part("low", start, 0, 1, shrink=1)
    high = add("high", "AddV2", [low, part("count", update_shape, 0, 1, shrink=1)], "z", T=i64)
    span = add("span", "Range", [low, high, vector("one", 1)], "output", Tidx=i64)
    column = const("column", -1, tf.int32.as_datatype_enum)
    indices = add("indices", "ExpandDims", [span, column], "output", T=i64, Tdim=i32)
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


def save(module, path, signatures, lower_slice_updates=True):
    """`tf.saved_model.save(module, path, signatures=signatures)` without
    the custom gradients (a server never differentiates, and saving them
    traced each one), then `finish_saved_model(path,
    lower_slice_updates)`; returns what that returns."""
    import tensorflow as tf

    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    tf.saved_model.save(module, path, signatures=signatures, options=options)
    return finish_saved_model(path, lower_slice_updates)


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
    from seqkeras.export import audit

    path = audit.saved_model_dir("finish_saved_model", path)
    saved = audit.read_saved_model(path)
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
        with open(os.path.join(path, "saved_model.pb"), "wb") as f:
            f.write(saved.SerializeToString())
        fingerprint = os.path.join(path, "fingerprint.pb")
        if os.path.exists(fingerprint):
            os.remove(fingerprint)
    return count
