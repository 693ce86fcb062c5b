"""An MXNet scheduler or server process: `python -m bench.mxnet.server cell.json` with
DMLC_ROLE=scheduler|server. Importing mxnet in that role runs the role until the workers
finish, then exits; the sampler logs its memory meanwhile and result.json records it."""
import sys

from bench.common import runner
from bench.mxnet.profiling import server_profile


def serve(config, sampler):
    sampler.progress(phase=config["role"])
    try:
        import mxnet  # noqa: F401  (runs the server / scheduler loop, then sys.exit())
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    else:
        raise RuntimeError("DMLC_ROLE=%s did not start an MXNet %s"
                           % (config["role"], config["role"]))
    result = {"versions": {"mxnet": runner.installed_version("mxnet")}}
    if config["role"] == "server":
        result["profile"] = server_profile(config)
    return result


def main(argv):
    config = runner.load_config(argv)
    runner.run(config, serve, {})


if __name__ == "__main__":
    main(sys.argv)
