# JupyterLab in this image (read from /etc/jupyter, so `jupyter lab` needs no flags):
# listens on all interfaces on $JUPYTER_PORT (8888), serves /workspace, runs as root as
# containers do. Access: $JUPYTER_TOKEN, or $JUPYTER_PASSWORD (hashed here at start-up);
# with neither, Jupyter makes a random token and prints the URL that carries it.
import os

c = get_config()  # type: ignore[name-defined]  # noqa: F821  (Jupyter's config loader provides it)
c.ServerApp.ip = "0.0.0.0"
c.ServerApp.port = int(os.environ.get("JUPYTER_PORT") or 8888)
c.ServerApp.open_browser = False
c.ServerApp.allow_root = True
c.ServerApp.root_dir = os.environ.get("JUPYTER_ROOT_DIR") or "/workspace"
if os.environ.get("JUPYTER_PASSWORD") and not os.environ.get("JUPYTER_TOKEN"):
    import jupyter_server
    from jupyter_server.auth import passwd

    hashed = passwd(os.environ["JUPYTER_PASSWORD"])
    if int(jupyter_server.__version__.split(".")[0]) >= 2:
        c.PasswordIdentityProvider.hashed_password = hashed
        c.IdentityProvider.token = ""
    else:  # jupyter-server 1 (JupyterLab 3.0, the 21.x images): the settings were the app's
        c.ServerApp.password = hashed
        c.ServerApp.token = ""
