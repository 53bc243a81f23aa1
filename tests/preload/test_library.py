"""The shared library's contract with the dynamic linker (README "Building and
dependencies"; preload/trainprof.map)."""
import re
import subprocess

import tputil


def _lib():
    return f"{tputil.build_dir()}/libtrainprof.so"


def test_no_cuda_library_is_needed():
    out = subprocess.run(["readelf", "-d", _lib()], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    assert needed, out
    for name in needed:
        assert not re.match(r"lib(cuda|cudart|cupti|cublas|cudnn|nccl)", name), needed
    assert "$ORIGIN" in out, "run path $ORIGIN lets nodes carry libjansson/libz beside the library"


def test_exports_only_entry_points_and_api():
    out = subprocess.run(["nm", "-D", "--defined-only", _lib()], capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    # kill and raise: a process sending itself SIGINT or SIGTERM (preload/selfsig.c)
    allowed = re.compile(r"^(cuda|__cuda|cu[A-Z]|cublas|cudnn|nccl|trainprof_|InitializeInjectionNvtx2$|dlsym$"
                         r"|kill$|raise$"
                         r"|__itt_(api_init|domain_create|string_handle_create|task_begin|task_end)$"
                         r"|cupti(ActivityRegisterCallbacks|ActivityRegisterTimestampCallback"
                         r"|ActivityDisable|Finalize)$)")
    assert "trainprof_step" in names and "cudaLaunchKernel" in names and "__cudaLaunchKernel" in names
    assert "InitializeInjectionNvtx2" in names
    assert "__itt_api_init" in names            # the ITT collector's entry point (preload/itt.c)
    assert "cuptiActivityRegisterCallbacks" in names   # another CUPTI client seen (preload/cupti.c)
    assert "kill" in names and "raise" in names
    stray = [n for n in names if not allowed.match(n)]
    assert not stray, stray
    # no versioned definitions: a named version node would stop versioned
    # references (cudaLaunchKernel@libcudart.so.13) from binding to us
    assert "@@" not in out and "@" not in "".join(names)
