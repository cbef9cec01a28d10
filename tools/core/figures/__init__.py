"""Figures that more than one tool draws (matplotlib, imported only when a figure is asked for):
text colours that read on their background, and the posterior figure of task difficulty."""
