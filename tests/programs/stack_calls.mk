# stack_calls: no -rdynamic: its callers are named from .symtab (collector/common/elfsym.c).
PROG_LIBS_stack_calls :=
$(B)/programs/stack_calls: tests/programs/stack_calls.mk
