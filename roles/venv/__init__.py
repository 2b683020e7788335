"""Stage 4: python3-venv, the venv with torch and bitsandbytes, and (for fleets without internet) the wheelhouse."""
