# static_rt: exports its fakegpu_set_observer (its linked-in runtime reports
# to the fake CUPTI, which looks for one in the global scope).
PROG_LIBS_static_rt := -Wl,--export-dynamic-symbol=fakegpu_set_observer
$(B)/programs/static_rt: tests/programs/static_rt.mk
