# Run as a cell of a NEW session after another session left a file in /tmp, a global and a
# module attribute (the driver's LEFT_* names): none of it may be visible here.
if os.path.exists("/tmp/" + LEFT_FILE):
    escaped("a file another session left in /tmp is visible")
else:
    blocked("the other session's /tmp file", "absent")
if LEFT_GLOBAL in globals():
    escaped("a global of another session is visible")
else:
    blocked("the other session's global", "absent")
if getattr(os, LEFT_GLOBAL, None) is not None:
    escaped("a module attribute another session set is visible")
else:
    blocked("the other session's module attribute", "absent")
finish()
