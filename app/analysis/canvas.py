"""The canvas every plot draws on: matplotlib's Agg, its renderers sharing one mathtext parser. Each Agg renderer
makes its own parser, whose cache of parsed labels (the log axes' 10^k, the columns' symbols) then serves one
figure only; shared, a label parsed for one plot serves every plot after it (a third of the drawing time)."""

from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg

MATHTEXT = RendererAgg(1, 1, 72).mathtext_parser  # the parser an Agg renderer makes for itself


class Canvas(FigureCanvasAgg):
    """An Agg canvas (png() draws on it, and so does Figure.draw_without_rendering) whose renderers use MATHTEXT."""

    def get_renderer(self):
        renderer = super().get_renderer()
        renderer.mathtext_parser = MATHTEXT
        return renderer
