"""The ``tracekit calibrate`` command (its work is in ``tracekit.calibrate``)."""

from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    """Add the ``calibrate`` command to the tracekit CLI."""

    @app.command(context_settings={"help_option_names": ["-h", "--help"]})
    def calibrate(
        device: Optional[str] = typer.Option(None, "--device", "-d", help="cuda, mps, mlx (MLX's GPU, else its "
                                             "CPU), mlx-cpu or cpu (torch); default: the first of these here"),
        out: Optional[str] = typer.Option(None, "--out", "-o", help="write the spec file here (e.g. "
                                          "my_device.toml); its stem is the spec id"),
        format: Optional[str] = typer.Option(None, "--format", "-f", help="stdout: table (default with -o), "
                                             "toml (the spec; default without -o) or json"),
        quick: bool = typer.Option(False, "--quick/--no-quick", metavar="", help="small sizes, few repeats: seconds, for tests; not roofs"),
        spec_id: Optional[str] = typer.Option(None, "--id", help="spec id (default: the -o file's stem)"),
        name: Optional[str] = typer.Option(None, "--name", help="spec name (default: '<device> (measured)')"),
        quiet: bool = typer.Option(False, "--quiet/--no-quiet", "-q", metavar="", help="nothing on stderr but errors"),
        force: bool = typer.Option(False, "--force/--no-force", metavar="", help="replace an existing -o file"),
    ) -> None:
        """Measure this machine's roofs (copy bandwidth, matrix rate per dtype, elementwise bandwidth,
        shortest kernel) and write them as a spec file for --spec, beside the datasheet's figures."""
        from tracekit.calibrate.run import calibrate_command

        raise typer.Exit(calibrate_command(device, out, format, quick, spec_id, name, quiet, force))
