"""The screens: the live session, help, and the save / recovery dialogs."""
