"""Forecasting a univariate series (airline passengers, Melbourne daily
minimum temperatures) with seqkeras: a recurrent, Transformer or
encoder-decoder forecaster of quantiles, judged against the
seasonal-naive forecast and a classical statsmodels model.

    python apps/forecast.py train --out runs/airline --model lstm \\
        --csv ../shared/data/timeseries/airline-passengers.csv
    python apps/forecast.py evaluate --model runs/airline \\
        --csv ../shared/data/timeseries/airline-passengers.csv
    python apps/forecast.py export --model runs/airline

Data: a CSV file with a header line and two columns, a date and a value
(quoted or not, LF or CRLF), one row per time step in time order. The last
20% of the rows are held back for evaluation; `train` uses the rows before
them, the last `--validation` share of those for choosing the best epoch.
The season is 12 for `YYYY-MM` dates and 365 for `YYYY-MM-DD` dates (the
temperature file has no 29 February), else `--season`.

`train` fits `--model` (`lstm`, `gru`, `transformer`: the library's
`forecaster`; `seq2seq`: `seq2seq_forecaster`, teacher-forced) on windows
of `--window` values to forecast the next `--horizon`, as the 10%, 50%
and 90% quantiles (pinball loss; `--quantiles`), each window scaled by its
own mean and deviation inside the model (raw values in, raw values out),
into the apps' model directory (the best weights by validation loss).

`evaluate` reads any CSV of that shape, forecasts from every origin in
its last 20% (rolling origin: the `--window` values before the origin in,
the next `--horizon` out), and prints MAE, RMSE, MASE and the coverage of
the 10-90% interval for the model, the seasonal-naive forecast ("same as
last season") and statsmodels' SARIMA (`seqkeras.data.sarima_forecasts`).
MASE is the MAE over the seasonal-naive forecast's MAE on the same
targets: below 1 beats "same as last season". With
`--plot` it draws history, truth, forecast and the interval band. Its last
line is `MASE = <number>`. `export` writes the SavedModel (raw values in
and out, checked against Keras in a process without seqkeras), builtin-op
TFLite and ONNX.

Bad input (a missing or non-UTF-8 file, a missing value, a cell that is
not a number, a series too short for the window and horizon, a directory
that is not a trained model) ends with a one-line error and exit status 2.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import quiet  # noqa: F401  (first: TensorFlow without its start-up lines)

import numpy as np

import common
from common import AppError

PROG = "forecast.py"
KILL_ENV = "FORECAST_APP_KILL_AFTER_EPOCH"  # tests: SIGKILL after epoch N
MODELS = sorted(common.presets("forecast")["models"])  # presets.json
HELD_BACK = 0.2
# --window and --horizon by season when not given
WINDOWS = {12: (36, 12), 365: (90, 14)}


def series_file(name):
    return common.shared_file("timeseries", name)


def read(path):
    from seqkeras.data import read_series_csv

    return common.read_data(read_series_csv, path, name=PROG)


def season_of(dates, given=None):
    """`given`, else 12 for YYYY-MM dates and 365 for YYYY-MM-DD."""
    if given:
        return given
    import re

    if all(re.fullmatch(r"\d{4}-\d{2}", d) for d in dates[:3]):
        return 12
    if all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", d) for d in dates[:3]):
        return 365
    raise AppError(f"cannot tell the season from dates like {dates[0]!r}; give --season")


def held_back_start(n):
    """The first held-back (evaluation) step: the last 20% of `n`."""
    return n - int(round(HELD_BACK * n))


def load(directory):
    """`(model, config)`; the config's `window`, `horizon` and `quantiles`
    are its builder's."""
    model, config = common.load(directory)
    config.update(
        window=config["sizes"]["input_steps"],
        horizon=config["sizes"]["horizon"],
        quantiles=config["arguments"].get("quantiles"),
    )
    return model, config


def windows(values, window, horizon, first=None, last=None, what="series"):
    from seqkeras.data.series import rolling_windows

    return common.read_data(
        rolling_windows, values, window, horizon, first, last, name=PROG, what=what
    )


def train(args):
    import seqkeras

    dates, values = read(args.csv)
    season = season_of(dates, args.season)
    window, horizon = WINDOWS.get(season, (2 * season, season))
    window = args.window or window
    horizon = args.horizon or horizon
    quantiles = [float(q) for q in args.quantiles.split(",")] if args.quantiles else None
    end = held_back_start(len(values))
    split = end - max(2 * horizon, int(round(args.validation * end)))
    what = f"--csv {args.csv} (training part, the rows before {split})"
    x, y, _ = windows(values, window, horizon, last=split - horizon, what=what)
    what = f"--csv {args.csv} (validation part, rows {split}-{end})"
    vx, vy, _ = windows(values, window, horizon, first=split, last=end - horizon, what=what)
    common.begin_training(args)
    overrides = {k: getattr(args, k) for k in ("units", "num_layers", "dropout", "num_heads")}
    if args.model != "transformer":
        overrides.pop("num_heads")
    fit_x = x
    val_x = vx
    trainer = None
    if args.model == "seq2seq":  # teacher-forced: the true future feeds the decoder
        fit_x = {"series": x, "future": y}
        val_x = {"series": vx, "future": vy}

        def trainer(model):  # the model with the true future as the decoder's input
            return model.teacher_forcing_model()

    loss = seqkeras.training.PinballLoss(quantiles) if quantiles else "mae"

    def sizes(builder, arguments):
        arguments["quantiles"] = quantiles
        return {"input_steps": window, "horizon": horizon}

    def options(model):
        return {"task": "regression", "learning_rate": args.lr, "loss": loss, "metrics": []}

    rows = dict(training_rows=split, validation_rows=[split, end], held_back_from=end)
    model, fitted, _ = common.new_model(
        args, "forecast", sizes, options, trainer, overrides, season=season, **rows
    )
    print(
        f"{args.model} forecaster: {model.count_params():,} parameters; window {window}, "
        f"horizon {horizon}, season {season}; {len(x)} training windows (rows < {split}), "
        f"{len(vx)} validation windows (targets in rows {split}-{end - 1}), rows from {end} "
        "held back"
    )
    curves = ("", "pinball loss (raw units)", None, None, True)  # one panel, log scale
    common.fit_and_report(
        fitted, args, fit_x, KILL_ENV, curves, (val_x, vy), target=model, y=y, batch_size=args.batch
    )


def model_forecasts(model, config, x):
    """`(median, low, high)` (n, horizon, 1) of the model from windows
    `x`; low/high are the outermost quantiles (None without quantiles)."""
    f = np.asarray(model.predict(x, batch_size=256, verbose=0), "float64")
    q = config["quantiles"]
    if not q:
        return f, None, None
    mid = min(range(len(q)), key=lambda i: abs(q[i] - 0.5))
    return f[..., mid], f[..., 0], f[..., -1]


def evaluate(args):
    from seqkeras.data import sarima_forecasts
    from seqkeras.data.series import coverage, forecast_errors, seasonal_naive

    model, config = load(args.model)
    dates, values = read(args.csv)
    window = config["window"]
    horizon = config["horizon"]
    season = args.season or config["season"]
    end = held_back_start(len(values))
    if end < max(window, season):
        raise AppError(
            f"--csv {args.csv}: {len(values)} rows hold back the last "
            f"{len(values) - end} for evaluation, leaving {end} before "
            f"them; the model's window ({window}) and the season "
            f"({season}) need at least {max(window, season)}"
        )
    x, y, origins = windows(
        values, window, horizon, first=end, what=f"--csv {args.csv} (held-back part from row {end})"
    )
    start = time.perf_counter()
    median, low, high = model_forecasts(model, config, x)
    seconds = time.perf_counter() - start
    naive = seasonal_naive(values, origins, horizon, season)
    rows = [
        (f"{config['model']} (seqkeras)", median, low, high),
        ("seasonal naive", naive, None, None),
    ]
    if args.baseline == "sarima":
        start_fit = time.perf_counter()
        name, mean, blow, bhigh = sarima_forecasts(values, end, origins, horizon, season)
        rows.append((f"{name} (statsmodels)", mean, blow, bhigh))
        fit_seconds = time.perf_counter() - start_fit
    print(
        f"{args.csv}: {len(values)} rows, held back from row {end} "
        f"({dates[end]}); {len(origins)} forecast origins x {horizon} "
        f"steps; window {window}, season {season}; model "
        f"{len(x) / seconds:,.0f} windows/s"
    )
    if args.baseline == "sarima":
        print(f"statsmodels baseline fitted and rolled in {fit_seconds:.1f} s")
    print(f"{'forecast':<40} {'MAE':>9} {'RMSE':>9} {'MASE':>7} {'10-90% coverage':>16}")
    errors = [forecast_errors(y, f, naive) for _, f, _, _ in rows]
    for (name, f, lo, hi), e in zip(rows, errors):
        cover = "" if lo is None else f"{100 * coverage(y, lo, hi):.1f}%"
        print(f"{name:<40} {e['mae']:9.3f} {e['rmse']:9.3f} {e['mase']:7.3f} {cover:>16}")
    if args.plot:
        from seqkeras.plots import plot_forecast

        label = f"{config['model']} median forecast, 10-90% interval"
        shown = [(label, median, low, high)] + [(r[0], r[1], None, None) for r in rows[2:]]
        plot_forecast(args.plot, dates, values, end, origins, horizon, shown, args.history)
        print(f"plot: {args.plot}")
    print(f"MASE = {errors[0]['mase']:.4f}")


def export(args):
    from seqkeras.export import export_and_verify, fresh_signature

    model, config = load(args.model)
    out = args.out or os.path.join(args.model, "export")
    values = None
    csv_path = config["training"].get("csv")
    if csv_path and os.path.isfile(csv_path):
        values = read(csv_path)[1]
    if values is None or len(values) < config["window"] + 8:
        values = 100 + np.cumsum(np.random.default_rng(0).normal(size=config["window"] + 8))
    x, _, _ = windows(values, config["window"], 1)
    samples = [x[:1], x[-8:]]
    report = export_and_verify(model, "forecast", samples, out, tolerance=1e-4)
    fresh, _ = fresh_signature(  # in a process where seqkeras cannot be imported
        report["savedmodel"], "serving_default", series=np.asarray(samples[1], "float32")
    )
    fresh = np.asarray(fresh["forecast"])
    keras_out = np.asarray(model.predict(samples[1], verbose=0))
    diff = float(np.max(np.abs(fresh - keras_out)))
    print(
        f"SavedModel in a process without seqkeras, raw values in and out: max |diff| to Keras "
        f"{diff:.2g} (forecasts up to {np.abs(keras_out).max():.1f})"
    )
    if diff > 1e-3 * max(1.0, float(np.abs(keras_out).max())):
        raise RuntimeError("the exported forecaster differs from Keras")
    report.update(fresh_process_max_diff=diff)
    common.write_report(report, out)


def parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = common.subcommand(sub, "train", "train a forecaster", train, False)
    t.add_argument("--out", required=True, help="the model directory")
    t.add_argument("--csv", default=series_file("airline-passengers.csv"))
    t.add_argument("--model", default="lstm", choices=MODELS)
    t.add_argument("--quantiles", default="0.1,0.5,0.9", help="levels ('' for one value, MAE)")
    common.add_overrides(t, "default: from the dates' season", season=int, window=int, horizon=int)
    share = "share of the training rows for validation"
    t.add_argument("--validation", type=float, default=0.15, help=share)
    common.add_overrides(t, units=int, num_layers=int, dropout=float, num_heads=int)
    common.add_fit_options(t, epochs=100, batch=32, lr=3e-3)
    common.add_training_options(t)
    e = common.subcommand(sub, "evaluate", "MAE, RMSE, MASE on the last 20%%", evaluate)
    e.add_argument("--csv", required=True)
    e.add_argument("--season", type=int, help="default: the model's (its training data's)")
    e.add_argument("--baseline", default="sarima", choices=("sarima", "none"))
    e.add_argument("--plot", help="write the forecast plot (PNG) here")
    held_back = "steps of history before the held-back part"
    e.add_argument("--history", type=int, default=96, help=held_back)
    x = common.subcommand(sub, "export", "SavedModel, TFLite, ONNX, verified", export)
    x.add_argument("--out", help="default: MODEL/export")
    return p


def main(argv=None):
    common.run(PROG, parser(), argv, required=("csv",))


if __name__ == "__main__":
    main()
