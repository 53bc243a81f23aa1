# stack_calls: export the callers so that dladdr names them in stacks.
PROG_LIBS_stack_calls := -rdynamic
$(B)/programs/stack_calls: tests/programs/stack_calls.mk
