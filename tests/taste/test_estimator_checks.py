"""scikit-learn's own conformance suite, for the product default and the faithful mode."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from frame.taste import IKNNClassifier


@parametrize_with_checks([IKNNClassifier(), IKNNClassifier(faithful=True, n_neighbors=3)])
def test_sklearn_conventions(estimator, check):
    check(estimator)
