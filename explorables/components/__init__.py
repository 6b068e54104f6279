"""Views shared by the explorables: tables, plots, the prediction gate, URL state, text alternatives."""
