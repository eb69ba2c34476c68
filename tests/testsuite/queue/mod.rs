mod simple;
