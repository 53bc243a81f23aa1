"""trainprof's sitecustomize: count PyTorch optimizer steps with no script change.

`trainprof run` puts this folder first on PYTHONPATH for Python commands.  At
interpreter start it

1. runs the sitecustomize this one shadows (the next one on sys.path), if any;
2. arranges that, when (and only when) the program imports
   torch.optim.optimizer, trainprof_step() of the preloaded libtrainprof.so
   is called (through ctypes) where a training iteration ends: step signal
   `api`, Kineto's KINETO_USE_DAEMON hook without the daemon.  The step
   ends when the step() call of the iteration's last optimizer returns,
   after torch's "Optimizer.step#..." annotation around it has closed, so
   that the annotation lies inside its step.  For that, torch's
   Optimizer.profile_hook_step (which wraps every optimizer class's step()
   in that annotation) is wrapped once more, outside it; where torch lacks
   it, a global optimizer-step post hook
   (register_optimizer_step_post_hook) ends the step instead, inside the
   annotation.  One iteration is one step, whatever the number of
   optimizers: the step owner is the last optimizer of the iteration's
   cycle.  The first optimizer to step owns the steps; an optimizer never
   seen before that steps after it (a GAN's generator after its
   discriminator, the second optimizer of multi-optimizer fine-tuning)
   becomes the owner from then on, without ending a step, so that step N
   is iteration N from the second iteration on (step 1 also holds the
   first iteration's later optimizers, which ran before the cycle was
   known).  An owner that is garbage-collected hands over to the next
   optimizer to step.
3. turns torch's own operator ranges on while the library says a step warms
   up or records (trainprof_phase() 1 or 2), and off again at the step
   where that ends.  The library reads the ranges back as operators.  Two
   of torch's profiler states announce operators to a tool library:
   - ITT (what torch.autograd.profiler.emit_itt uses): the bare operator
     name to the library as ITT collector (INTEL_LIBITTNOTIFY64), the
     cheaper one, used when torch has ITT and the library says ITT reaches
     it (trainprof_itt_collector() 1 or 2);
   - NVTX (what torch.autograd.profiler.emit_nvtx uses, without its
     torch.cuda.synchronize()): a formatted message per operator, with
     sequence numbers and, with TRAINPROF_RECORD_SHAPES=1, shapes, which
     ITT does not carry; used for shapes, without ITT, and from the step
     after one where ITT never reached the library.
4. keeps out of the way of the program's own profiler.  torch runs one
   profiler at a time: enabling a second raises "Profiler is already
   enabled on this thread", which would stop a program that profiles
   itself (torch.profiler, torch.autograd.profiler.profile,
   profiler_legacy, emit_itt, emit_nvtx, Lightning's profilers).  So
   torch's enabling functions are wrapped (in torch.autograd and in the
   modules that imported them by name): a program's profiler that starts
   while our ranges are on first turns ours off, and ours stay off while
   any other profiler is on.  Where the program's profiler does not hand
   torch's operators on to the library (all but emit_itt with the library
   as ITT collector, and emit_nvtx), trainprof_operators_lost() tells the
   library, which says in the window's trace, summary and log line which
   steps lack operators and why.
5. tells the library torch.distributed's default process group (backend,
   rank, size: trainprof_process_group()) at the first step after it is
   made or destroyed, for the trace's distributedInfo.
6. with the hang doctor on (TRAINPROF_HANG_S > 0, or unset with
   TRAINPROF_FLIGHT > 0; collector/control/hang.c),
   registers Python's faulthandler, all threads, on a free real-time signal
   (the highest whose handler is the default, below SIGRTMAX - 1, which the
   library keeps for native stacks), writing into a memory file named
   "trainprof-pystacks.<signal>": the library finds it by that name, sends
   the signal at a hang report and puts what faulthandler wrote in it.

torch is never imported here: processes that do not use it (the torchrun
agent, compilers, DataLoader helpers, tools) pay one meta-path entry and
nothing else.  Without the library (or with an old torch) the hook is a
no-op.  Nothing here raises or prints: a failure leaves the program exactly
as it would run without us.
"""

import sys

_TARGET = "torch.optim.optimizer"


def _trainprof_chain():
    """Run the sitecustomize module this file shadows, if there is one."""
    import importlib.machinery
    import importlib.util
    import os

    here = os.path.dirname(os.path.realpath(__file__))
    path = []
    for p in sys.path:
        try:
            if os.path.realpath(p or os.curdir) == here:
                continue
        except Exception:
            continue
        path.append(p)
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # let `import sitecustomize` elsewhere still see the other module's names
    me = sys.modules.get(__name__)
    if me is not None:
        for k, v in vars(mod).items():
            if not k.startswith("__") and not hasattr(me, k):
                setattr(me, k, v)


_trainprof_fns = {}             # the library's functions by name (False: not there)
_trainprof_owner = None         # a weak reference to the step owner, or its id()
_trainprof_known = None         # the optimizers seen step (a WeakSet), and ids of
_trainprof_known_ids = set()    # those that cannot be weakly referenced
_trainprof_ops_on = False       # torch's operator ranges are on (ours): "itt" or "nvtx"
_trainprof_itt_failed = False   # ITT was on for a step and never reached the library


def _trainprof_fn(name, returns_int, argtypes=()):
    """The preloaded library's function NAME through ctypes, taking
    arguments of the ctypes types "argtypes", looked up once; False where
    the library is not preloaded (or older)."""
    fn = _trainprof_fns.get(name)
    if fn is None:
        import ctypes
        try:
            fn = getattr(ctypes.CDLL(None), name)
            fn.restype = ctypes.c_int if returns_int else None
            fn.argtypes = list(argtypes)
        except (AttributeError, OSError):
            fn = False
        _trainprof_fns[name] = fn
    return fn


def _trainprof_ref(optimizer):
    try:
        import weakref
        return weakref.ref(optimizer)
    except TypeError:               # not weakly referenceable: keep its id
        return id(optimizer)


def _trainprof_seen(optimizer):
    """True if "optimizer" has stepped before; remembers it."""
    global _trainprof_known
    if _trainprof_known is None:
        import weakref
        _trainprof_known = weakref.WeakSet()
    try:
        if optimizer in _trainprof_known:
            return True
        _trainprof_known.add(optimizer)
        return False
    except TypeError:
        if id(optimizer) in _trainprof_known_ids:
            return True
        _trainprof_known_ids.add(id(optimizer))
        return False


def _trainprof_is_owner(optimizer):
    """1 if "optimizer" owns the steps (its step() ends the iteration).  The
    first optimizer to step owns them, and so does the next one to step
    after the owner is gone; a new optimizer stepping after the owner
    becomes the owner without ending this step (the iteration's cycle goes
    on past the old owner)."""
    global _trainprof_owner
    seen = _trainprof_seen(optimizer)
    owner = _trainprof_owner
    if owner is not None:
        live = owner if isinstance(owner, int) else owner()
        if live is not None:
            if (live == id(optimizer)) if isinstance(owner, int) else (live is optimizer):
                return True
            if not seen:
                _trainprof_owner = _trainprof_ref(optimizer)
            return False
    _trainprof_owner = _trainprof_ref(optimizer)
    return True


_trainprof_exit_hooked = False


def _trainprof_ops_off():
    try:
        _trainprof_ops(False)
    except Exception:
        pass


def _trainprof_itt():
    """trainprof_itt_collector(): 2 torch's ITT calls reach the library, 1
    they will at the first one, 0 no (or an older library)."""
    fn = _trainprof_fn("trainprof_itt_collector", True)
    return fn() if fn else 0


def _trainprof_ops(want):
    """Turn torch's operator ranges on (want) or off, once per change."""
    global _trainprof_ops_on
    if bool(want) == bool(_trainprof_ops_on):
        return
    import torch.autograd as ag
    _trainprof_guard()
    if want:
        if ag._profiler_enabled():                    # someone else's profiler
            return
        import os
        import torch
        shapes = os.environ.get("TRAINPROF_RECORD_SHAPES", "0") not in ("", "0")
        use_itt = (not shapes and not _trainprof_itt_failed and _trainprof_itt() in (1, 2)
                   and torch.profiler.itt.is_available())
        state = ag.ProfilerState.ITT if use_itt else ag.ProfilerState.NVTX
        cfg = ag.ProfilerConfig(state, shapes, False, False, False, False,
                                ag._ExperimentalConfig()
                                if hasattr(ag, "_ExperimentalConfig")
                                else torch._C._profiler._ExperimentalConfig())
        _trainprof_real.get("_enable_profiler", ag._enable_profiler)(cfg, set())
        _trainprof_ops_on = "itt" if use_itt else "nvtx"
        global _trainprof_exit_hooked
        if not _trainprof_exit_hooked:
            import atexit
            atexit.register(_trainprof_ops_off)     # torch warns about a state left on
            _trainprof_exit_hooked = True
    else:
        _trainprof_ops_on = False
        ag._disable_profiler()


# ---- the program's own profiler ---------------------------------------------

_trainprof_real = {}            # torch's enabling functions we wrapped, by name
_trainprof_theirs = None        # why operators are lost now (told the library), or None
_trainprof_their_why = None     # why they are lost while the program's latest
                                # profiler is on (None: its ranges reach us)


def _trainprof_lost(why):
    """Tell the library that torch's operators stop reaching it (why), or
    reach it again (None); once per change."""
    global _trainprof_theirs
    if why == _trainprof_theirs:
        return
    _trainprof_theirs = why
    import ctypes
    fn = _trainprof_fn("trainprof_operators_lost", False, (ctypes.c_char_p,))
    if fn:
        fn(why.encode() if why else None)


def _trainprof_loss_of(state, legacy):
    """Why operators are lost while a profiler of this torch.autograd
    ProfilerState is the program's, or None where they still reach us."""
    import torch.autograd as ag
    if not legacy and state == getattr(ag.ProfilerState, "NVTX", None):
        return None                 # emit_nvtx: its ranges reach the library
    if not legacy and state == getattr(ag.ProfilerState, "ITT", None) and _trainprof_itt() in (1, 2):
        return None                 # emit_itt, with the library as ITT collector
    if legacy:
        what = "torch.autograd.profiler_legacy"
    elif state is None or state == getattr(ag.ProfilerState, "KINETO", None):
        what = "torch.profiler"
    else:
        what = "torch.autograd.profiler, state %s" % getattr(state, "name", state)
    return "the program's own profiler (%s) was on, and torch runs one profiler at a time" % what


def _trainprof_state_of_caller():
    """The ProfilerState the program's profiler asks for.  torch's
    ProfilerConfig does not show it to Python; the object that calls the
    enabling function does: torch.autograd.profiler.profile (what
    torch.profiler uses) keeps it as profiler_kind, emit_itt and emit_nvtx
    are named for theirs.  None where the caller is something else."""
    import torch.autograd as ag
    f = sys._getframe(3)                # caller -> wrapper -> _trainprof_yield -> here
    obj = f.f_locals.get("self") if f is not None else None
    kind = getattr(obj, "profiler_kind", None)
    if kind is not None:
        return kind
    name = type(obj).__name__ if obj is not None else ""
    if name == "emit_itt":
        return ag.ProfilerState.ITT
    if name == "emit_nvtx":
        return ag.ProfilerState.NVTX
    return None


def _trainprof_yield(legacy):
    """Before the program's profiler is enabled: our ranges off."""
    try:
        if _trainprof_ops_on:
            _trainprof_ops(False)
        global _trainprof_their_why
        why = _trainprof_their_why = _trainprof_loss_of(_trainprof_state_of_caller(), legacy)
        ph = _trainprof_fn("trainprof_phase", True)
        if why and ph and ph() in (1, 2):
            _trainprof_lost(why)
    except Exception:
        pass


def _trainprof_wrap(name, real):
    legacy = name.endswith("_legacy")

    def wrapper(*args, **kwargs):
        _trainprof_yield(legacy)
        return real(*args, **kwargs)

    wrapper.__name__ = getattr(real, "__name__", name)
    wrapper.__doc__ = getattr(real, "__doc__", None)
    wrapper._trainprof_real = real
    return wrapper


def _trainprof_guard():
    """Wrap torch's profiler-enabling functions, once, wherever they are
    bound by name (torch.autograd, and the modules that imported them)."""
    ag = sys.modules.get("torch.autograd")
    if ag is None:
        return
    mods = [ag] + [m for m in (sys.modules.get("torch.autograd.profiler"),
                               sys.modules.get("torch.autograd.profiler_legacy")) if m]
    for name in ("_enable_profiler", "_enable_profiler_legacy"):
        current = getattr(ag, name, None)
        if current is None:
            continue
        real = _trainprof_real.get(name)
        if real is None:
            if getattr(current, "_trainprof_real", None) is not None:
                continue
            real = _trainprof_real[name] = current
        wrapper = getattr(ag, name)
        if getattr(wrapper, "_trainprof_real", None) is None:
            wrapper = _trainprof_wrap(name, real)
        for m in mods:
            if getattr(m, name, None) is real:
                setattr(m, name, wrapper)


_trainprof_group = None         # (backend, rank, world size) last told the library


def _trainprof_report_group():
    """Tell the library torch.distributed's default process group (for the
    trace's distributedInfo) when it changed since the last step: its
    backend, rank and size, or None once it is destroyed."""
    global _trainprof_group
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return
    try:
        group = None
        if dist.is_available() and dist.is_initialized():
            group = (str(dist.get_backend()), dist.get_rank(), dist.get_world_size())
    except Exception:
        return
    if group == _trainprof_group:
        return
    _trainprof_group = group
    import ctypes
    fn = _trainprof_fn("trainprof_process_group", False, (ctypes.c_char_p, ctypes.c_int, ctypes.c_int))
    if fn:
        if group:
            fn(group[0].encode("ascii", "replace"), group[1], group[2])
        else:
            fn(None, 0, 0)


def _trainprof_stepped(optimizer):
    """An optimizer's step() has finished: the step ends if it owns them."""
    try:
        if not _trainprof_is_owner(optimizer):
            return
        fn = _trainprof_fn("trainprof_step", False)   # False: not preloaded, a no-op
        if fn:
            _trainprof_report_group()
            if _trainprof_theirs is not None:
                import torch.autograd as ag
                if not ag._profiler_enabled():     # the program's profiler ended in this step
                    _trainprof_lost(None)
            fn()
            _trainprof_follow()
    except Exception:
        pass


_trainprof_tls = None           # threading.local(): .depth, step() calls under way


def _trainprof_depth(change=0):
    global _trainprof_tls
    if _trainprof_tls is None:
        import threading
        _trainprof_tls = threading.local()
    d = getattr(_trainprof_tls, "depth", 0) + change
    _trainprof_tls.depth = d
    return d


def _trainprof_step(*args, **_kwargs):
    """The global optimizer post hook (optimizer, args, kwargs): it ends the
    step only for an optimizer class whose step() our outer wrapper does not
    cover (one patched before the hook was installed)."""
    try:
        if args and _trainprof_depth() == 0:
            _trainprof_stepped(args[0])
    except Exception:
        pass


def _trainprof_wrap_hook_step(module):
    """Wrap Optimizer.profile_hook_step, which torch applies once to each
    optimizer class's step(), so that what it returns is wrapped once more:
    the step ends after torch's Optimizer.step# annotation has closed."""
    cls = getattr(module, "Optimizer", None)
    orig = cls.__dict__.get("profile_hook_step") if cls is not None else None
    if not isinstance(orig, staticmethod) or getattr(orig.__func__, "_trainprof", False):
        return
    import functools
    torch_hook = orig.__func__

    def profile_hook_step(func):
        inner = torch_hook(func)

        @functools.wraps(inner)
        def step(*args, **kwargs):
            _trainprof_depth(+1)
            try:
                out = inner(*args, **kwargs)
            finally:
                depth = _trainprof_depth(-1)
            if depth == 0 and args:     # not a step() called from another's step()
                _trainprof_stepped(args[0])
            return out
        return step

    profile_hook_step._trainprof = True
    cls.profile_hook_step = staticmethod(profile_hook_step)


def _trainprof_follow():
    """After a step: torch's operator ranges on while the step now beginning
    warms up or records."""
    global _trainprof_itt_failed
    try:
        ph = _trainprof_fn("trainprof_phase", True)
        if ph:
            if _trainprof_ops_on == "itt" and _trainprof_itt() != 2:
                _trainprof_itt_failed = True       # a step of ITT reached nothing
                _trainprof_ops(False)
            want = ph() in (1, 2)
            _trainprof_ops(want)
            if not want or _trainprof_ops_on:
                _trainprof_lost(None)
            else:                                  # the program's profiler is on
                import torch.autograd as ag
                _trainprof_lost(_trainprof_their_why if ag._profiler_enabled() else None)
    except Exception:
        pass


def _trainprof_register(module):
    try:
        register = getattr(module, "register_optimizer_step_post_hook", None)
        if register is not None and not getattr(module, "_trainprof_hooked", False):
            register(_trainprof_step)
            module._trainprof_hooked = True
            _trainprof_wrap_hook_step(module)
            _trainprof_guard()
    except Exception:
        pass


class _TrainprofFinder(object):
    """A one-shot meta-path finder: when torch.optim.optimizer is imported,
    find it with the other finders and register the hook once its module body
    has run."""

    def find_spec(self, name, path=None, target=None):
        if name != _TARGET:
            return None
        try:
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if find is not None:
                    spec = find(name, path, target)
                    if spec is not None:
                        break
            loader = getattr(spec, "loader", None)
            exec_module = getattr(loader, "exec_module", None)
            # patch only a loader made for this one module (a FileLoader
            # instance carries the module's name); a shared one is left alone
            if exec_module is None or isinstance(loader, type) or \
                    getattr(loader, "name", None) != name:
                return spec

            def exec_and_hook(module, _exec=exec_module):
                _exec(module)
                _trainprof_register(module)

            loader.exec_module = exec_and_hook
            return spec
        except Exception:
            return None


def _trainprof_install():
    mod = sys.modules.get(_TARGET)
    if mod is not None:                # already imported (unusual at startup)
        _trainprof_register(mod)
        return
    sys.meta_path.insert(0, _TrainprofFinder())


try:
    _trainprof_chain()
except Exception:                      # a broken sitecustomize must not stop us
    pass

def _trainprof_stamp():
    """Tell `trainprof run` that the hook loaded in a process of its job: it
    names a private folder (mkdtemp) in _TRAINPROF_HOOK_STAMPS, and says
    after the job when the hook loaded nowhere (python -I, a wrapper
    script).  An empty folder: created whole or not at all."""
    import os
    d = os.environ.get("_TRAINPROF_HOOK_STAMPS")
    if d:
        try:
            os.mkdir(os.path.join(d, "loaded"))
        except OSError:
            pass


try:
    _trainprof_stamp()
except Exception:
    pass


def _trainprof_pystacks():
    import os
    # the hang doctor is on with TRAINPROF_HANG_S > 0, or unset with the
    # flight recorder on (TRAINPROF_FLIGHT > 0: 60 s); "off"/0 turns it off
    hang = os.environ.get("TRAINPROF_HANG_S", "")
    try:
        on = float(hang) > 0 if hang else int(os.environ.get("TRAINPROF_FLIGHT", "0")) > 0
    except ValueError:
        on = False
    if not on or not hasattr(os, "memfd_create"):
        return
    import faulthandler
    import signal
    for sig in range(signal.SIGRTMAX - 2, signal.SIGRTMIN + 3, -1):
        if signal.getsignal(sig) == signal.SIG_DFL:
            break
    else:
        return
    fd = os.memfd_create("trainprof-pystacks.%d" % sig, os.MFD_CLOEXEC)
    try:
        faulthandler.register(sig, file=fd, all_threads=True, chain=False)
    except Exception:
        os.close(fd)


try:
    _trainprof_install()
except Exception:
    pass

try:
    _trainprof_pystacks()
except Exception:
    pass
